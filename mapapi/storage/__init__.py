"""Storage: the engine and its transactions, the models, migrations and backup."""
