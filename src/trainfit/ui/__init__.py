"""`trainfit ui`: a local web calculator. A thin shell over the Python API (trainfit.api, compare, plan,
generate) and the report renderers; FastAPI + one static page. Imported only by `trainfit ui` and its tests."""
