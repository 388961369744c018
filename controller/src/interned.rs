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
        let shared = take_equal(&mut lists, &list).unwrap_or_else(|| Arc::from(list));
        self.remember(&mut lists, &shared);
        shared
    }

    /// [`intern`](Self::intern) of a borrowed list: copied only if no equal list is held.
    pub fn share(&self, list: &[T]) -> Arc<[T]>
    where
        T: Clone,
    {
        let mut lists = self.lists.lock();
        let shared = take_equal(&mut lists, list).unwrap_or_else(|| Arc::from(list));
        self.remember(&mut lists, &shared);
        shared
    }

    /// Puts `list` in front, forgetting the oldest past `size`.
    fn remember(&self, lists: &mut VecDeque<Weak<[T]>>, list: &Arc<[T]>) {
        lists.push_front(Arc::downgrade(list));
        lists.truncate(self.size);
    }
}

/// The remembered list equal to `list`, if one is still held, taken out of `lists`.
fn take_equal<T: PartialEq>(lists: &mut VecDeque<Weak<[T]>>, list: &[T]) -> Option<Arc<[T]>> {
    let (i, held) = lists.iter().enumerate().find_map(|(i, held)| {
        let held = held.upgrade()?;
        (*held == *list).then_some((i, held))
    })?;
    lists.remove(i);
    Some(held)
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
        // A borrowed list is the held one when there is one, a copy otherwise.
        assert!(Arc::ptr_eq(&d, &recent.share(&[4])));
        assert_eq!(*recent.share(&[5, 6]), [5, 6]);
    }
}
