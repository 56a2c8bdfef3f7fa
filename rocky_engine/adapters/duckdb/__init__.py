"""DuckDB, the embedded warehouse (``[adapter.NAME] type = "duckdb"``)."""
