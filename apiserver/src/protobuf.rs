//! Decoding of Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`).
