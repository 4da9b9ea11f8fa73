"""Hypothesis strategies for emulator request bodies, shared by the in-process and the over-the-socket fuzzers."""

from __future__ import annotations

from hypothesis import strategies as st

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=5),
    max_leaves=12,
)
field_names = st.sampled_from(
    [
        "name",
        "partitions",
        "compartmentId",
        "messages",
        "key",
        "value",
        "type",
        "partition",
        "offset",
        "time",
        "groupName",
        "instanceName",
        "timeoutInMs",
        "commitOnGet",
        "retentionInHours",
        "streamPoolId",
    ]
)
bodies = st.one_of(
    json_values,
    st.dictionaries(field_names, json_values, max_size=6),
    st.fixed_dictionaries({"messages": st.lists(st.dictionaries(st.sampled_from(["key", "value"]), json_values))}),
)
