"""The Python worker daemon of a local export engine: pyspark's own, with what an export task imports loaded once,
before it forks workers (`spark.python.daemon.module`).

pyspark's daemon imports `pyspark.worker` in every forked worker, and the export's modules (pyarrow, the
client, and pandas, which pyarrow imports on its first array built from Python objects) after that. Executors
import pyspark from `pyspark.zip`, whose bytecode zipimport never caches, so a new worker spent seconds of CPU
compiling and importing before its first message. Loaded here, they are shared by every fork. So is the oci SDK,
which every task of an export to Object Storage needs (0.4 to 0.6 s of import per worker; Spark stops a worker
idle for a minute, so an export after a pause forks new ones). Only for local masters: a cluster's executors may
not have this package installed when their daemon starts.
"""

from __future__ import annotations

# imported for one effect: loaded once, here, before the daemon forks any worker
import oci  # noqa: F401
import pyarrow.compute
import pyarrow.csv
import pyarrow.parquet
import pyspark.worker  # noqa: F401
from pyspark import daemon
from pyspark.sql.pandas import serializers  # noqa: F401

from ocigroup_cli.export import writer  # noqa: F401

if __name__ == "__main__":
    import gc

    import pyarrow

    pyarrow.array([0])  # pyarrow imports pandas on its first array from Python objects: half a second a worker
    gc.freeze()  # the forked workers' collections skip what is loaded here, and leave its pages shared
    daemon.manager()
