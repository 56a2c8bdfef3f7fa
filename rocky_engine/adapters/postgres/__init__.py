"""PostgreSQL, the server warehouse (``[adapter.NAME] type = "postgres"``)."""
