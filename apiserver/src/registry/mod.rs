//! Per-kind strategies (defaulting, validation, spec/status split, tables, field selectors).
