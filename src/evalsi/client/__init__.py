"""`evalsi.Client`: the server's API from Python (sync and async), returning the same result
types as the embedded API."""
