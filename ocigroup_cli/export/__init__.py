"""The PySpark audit export (data source, job, manifest, verify). pyspark is imported only here, lazily."""
