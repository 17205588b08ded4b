"""The core tests' shared drivers (``shard_test_context``, ``consumer_group_context``) and test
doubles (``mock_timer``) live in this directory; the tests under ``classic/``, ``consumer/`` and
``migration/`` import them by module name. pytest (prepend import mode) puts a conftest's
directory on ``sys.path`` before collecting below it, which is all this file is for: it holds
no fixtures."""
