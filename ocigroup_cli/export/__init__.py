"""The PySpark audit export (reader, writer tasks, job, manifest, verify). pyspark is imported only here, lazily."""
