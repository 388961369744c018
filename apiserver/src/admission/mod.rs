//! Built-in validating admission that needs more than a kind's [`Strategy::admit`]
//! (crate::registry::Strategy::admit) hook: plugins that read and write other objects.
//!
//! The generic store calls [`resourcequota::validate`] on every create and on every update of a
//! main resource or of the subresources quota looks at, after the object was defaulted, mutated
//! by the kind's admission and validated, and before it is stored (upstream runs validating
//! admission at the same point, inside the store's create and its `GuaranteedUpdate`).

pub mod resourcequota;
