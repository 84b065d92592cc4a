//! A table whose freed slots are reused: values keep a stable `u32` slot for their lifetime, and
//! the table only grows to the most values held at once. The tile capacity tracker and the
//! scheduler's access-list arena use it.

/// A `Vec` of values addressed by slot, with a free list of the slots given back.
#[derive(Debug, Clone)]
pub(crate) struct SlotVec<T> {
    items: Vec<T>,
    free: Vec<u32>,
}

impl<T> Default for SlotVec<T> {
    fn default() -> SlotVec<T> {
        SlotVec {
            items: Vec::new(),
            free: Vec::new(),
        }
    }
}

impl<T> SlotVec<T> {
    /// Stores `value` in a freed slot if there is one, else in a new slot; returns the slot.
    #[inline]
    pub(crate) fn insert(&mut self, value: T) -> u32 {
        match self.free.pop() {
            Some(slot) => {
                self.items[slot as usize] = value;
                slot
            }
            None => {
                self.items.push(value);
                (self.items.len() - 1) as u32
            }
        }
    }

    /// Gives `slot` back for a later [`insert`](SlotVec::insert) (its value stays until then).
    #[inline]
    pub(crate) fn release(&mut self, slot: u32) {
        self.free.push(slot);
    }

    /// The value in `slot`, if the table ever had that slot.
    #[inline]
    pub(crate) fn get(&self, slot: u32) -> Option<&T> {
        self.items.get(slot as usize)
    }

    /// The value in `slot`, mutably, if the table ever had that slot.
    #[inline]
    pub(crate) fn get_mut(&mut self, slot: u32) -> Option<&mut T> {
        self.items.get_mut(slot as usize)
    }

    /// Every slot's value, released or not, in slot order.
    pub(crate) fn iter(&self) -> std::slice::Iter<'_, T> {
        self.items.iter()
    }
}

impl<T> std::ops::Index<u32> for SlotVec<T> {
    type Output = T;

    #[inline]
    fn index(&self, slot: u32) -> &T {
        &self.items[slot as usize]
    }
}

impl<T> std::ops::IndexMut<u32> for SlotVec<T> {
    #[inline]
    fn index_mut(&mut self, slot: u32) -> &mut T {
        &mut self.items[slot as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::SlotVec;

    #[test]
    fn released_slots_are_reused_before_the_table_grows() {
        let mut t = SlotVec::default();
        assert_eq!((t.insert('a'), t.insert('b'), t.insert('c')), (0, 1, 2));
        t.release(1);
        assert_eq!(t.insert('d'), 1);
        assert_eq!(t.insert('e'), 3);
        assert_eq!(t.iter().copied().collect::<String>(), "adce");
        t[0] = 'z';
        assert_eq!((t.get(0), t.get(4)), (Some(&'z'), None));
    }
}
