"""The HTTP API (FastAPI) and the process that serves it next to the read model.

`peloton.api.app.create_app(store, publisher)` builds the app; `peloton.api.service.run_api`
runs the materializer and the API in one process.
"""
