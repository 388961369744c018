//! `Object`: what the informer machinery needs of a cached object, its `ObjectMeta` (apimachinery's
//! `metav1.Object` accessor interface).
//!
//! Every k8s-openapi type has it through the blanket impl over `k8s_openapi::Metadata`;
//! [`DynamicObject`](crate::dynamic::DynamicObject) implements it directly, so the reflector, the
//! DeltaFIFO, the indexer, listers and shared informers work alike over typed and dynamic objects.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// An object with `ObjectMeta`.
pub trait Object {
    fn meta(&self) -> &ObjectMeta;
    fn meta_mut(&mut self) -> &mut ObjectMeta;
}

impl<K: k8s_openapi::Metadata<Ty = ObjectMeta>> Object for K {
    fn meta(&self) -> &ObjectMeta {
        self.metadata()
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        self.metadata_mut()
    }
}
