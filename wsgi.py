from mapapi import create_app

app = create_app()
