//! kubelet-fake
