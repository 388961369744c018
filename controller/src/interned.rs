//! Lists that many cached objects carry equal, held once: nearly every pod carries the same two
//! tolerations (`DefaultTolerationSeconds`), and every pod of one ReplicaSet the same owner
//! reference. Each copy held apart costs a few hundred bytes a pod.
//!
//! A [`RecentLists`] remembers the last few distinct lists it was given, weakly: a list equal to
//! one of them is that one, and a list lives only while something holds it. The memory is
//! bounded by its size (a handful of weak pointers) whatever the lists are; a list that is not
//! among the recent ones is simply held on its own.

use std::collections::VecDeque;
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

/// See the module documentation.
pub struct RecentLists<T> {
    /// The lists given last, the most recent first; at most `size`.
    lists: Mutex<VecDeque<Weak<[T]>>>,
    size: usize,
}

impl<T: PartialEq> RecentLists<T> {
    /// Remembers at most `size` lists.
    pub const fn new(size: usize) -> Self {
        RecentLists {
            lists: Mutex::new(VecDeque::new()),
            size,
        }
    }

    /// `list`, as the equal list held already if it is among the recent ones.
    pub fn intern(&self, list: Vec<T>) -> Arc<[T]> {
        let mut lists = self.lists.lock();
        let found = lists.iter().enumerate().find_map(|(i, held)| {
            let held = held.upgrade()?;
            (*held == *list).then_some((i, held))
        });
        let list = match found {
            Some((i, held)) => {
                lists.remove(i);
                held
            }
            None => Arc::from(list),
        };
        lists.push_front(Arc::downgrade(&list));
        lists.truncate(self.size);
        list
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_lists_are_one_while_held_and_recent() {
        let recent = RecentLists::new(2);
        let a = recent.intern(vec![1, 2]);
        let b = recent.intern(vec![1, 2]);
        assert!(Arc::ptr_eq(&a, &b));
        // Two other lists push [1, 2] out: an equal list given then is held on its own.
        let (c, d) = (recent.intern(vec![3]), recent.intern(vec![4]));
        let e = recent.intern(vec![1, 2]);
        assert!(!Arc::ptr_eq(&a, &e));
        assert_eq!(*e, [1, 2]);
        assert!(Arc::ptr_eq(&d, &recent.intern(vec![4])));
        // A list nobody holds is not kept alive.
        let weak = Arc::downgrade(&c);
        drop(c);
        assert!(weak.upgrade().is_none());
        assert_eq!(recent.lists.lock().len(), 2);
    }
}
