"""The test suite's shared helpers: test modules import these, and no test module imports
another."""
