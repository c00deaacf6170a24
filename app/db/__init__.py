"""The database: connection (embedded or given), schema tables, named SQL, migrations."""
