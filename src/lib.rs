//! minik8s
