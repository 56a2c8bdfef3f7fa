"""Fivetran, a discovery adapter (``[adapter.NAME] type = "fivetran"``): which connector schemas exist."""
