"""The HTTP service: a JSON API and review pages over the same Index (``neardup serve``).

``create_app`` (in ``app``) needs the ``service`` extra (FastAPI, uvicorn, Jinja2); ``secrets``
(tokens and their hashes) needs nothing beyond the standard library, so the token commands work
without it.
"""
