//! Node lifecycle.
