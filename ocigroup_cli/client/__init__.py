"""The one adapter to the OCI Streaming REST API (auth, endpoints, retries with a deadline, error mapping).

May import core/ and errors; never ops/, commands/, emulator/ or export/.
"""
