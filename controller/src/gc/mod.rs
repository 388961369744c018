//! Garbage collector.
