//! Shared harness for capsaga integration tests.
