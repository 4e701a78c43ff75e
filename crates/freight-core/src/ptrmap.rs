//! Maps keyed by object address (the encoder's memo, its caches): a hash suited to pointers
//! (SipHash is needlessly slow here, and addresses are not attacker-chosen), and a small map
//! that avoids the hash table for the few entries most payloads need.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

#[derive(Default)]
pub struct PtrHasher(u64);

impl Hasher for PtrHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8 | b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        // Addresses are 16-byte aligned: drop the zero bits, then spread over all 64 bits.
        let h = ((n as u64) >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 = h ^ (h >> 29);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

pub type PtrMap<V> = HashMap<usize, V, BuildHasherDefault<PtrHasher>>;

/// How many entries `SmallPtrMap` keeps inline before it moves them into a hash map.
const INLINE: usize = 8;

/// A `PtrMap` that holds its first few entries in an inline array, searched linearly: most
/// payloads memoize a handful of objects (a few shared strings, the root), and for them a hash
/// table's allocation and hashing cost more than the scan (a fifth of a small `dumps`).
#[derive(Default)]
pub struct SmallPtrMap<V: Copy + Default> {
    inline: [(usize, V); INLINE],
    len: usize,
    /// Used alone once more than INLINE entries were inserted.
    spill: Option<PtrMap<V>>,
}

impl<V: Copy + Default> SmallPtrMap<V> {
    #[inline]
    fn position(&self, key: usize) -> Option<usize> {
        self.inline[..self.len].iter().position(|&(k, _)| k == key)
    }

    #[inline]
    pub fn get(&self, key: &usize) -> Option<&V> {
        match &self.spill {
            Some(map) => map.get(key),
            None => self.position(*key).map(|i| &self.inline[i].1),
        }
    }

    #[inline]
    pub fn get_mut(&mut self, key: &usize) -> Option<&mut V> {
        match &mut self.spill {
            Some(map) => map.get_mut(key),
            None => {
                let len = self.len;
                self.inline[..len]
                    .iter_mut()
                    .find(|(k, _)| k == key)
                    .map(|(_, v)| v)
            }
        }
    }

    #[inline]
    pub fn insert(&mut self, key: usize, value: V) {
        if let Some(map) = &mut self.spill {
            map.insert(key, value);
        } else if let Some(i) = self.position(key) {
            self.inline[i].1 = value;
        } else if self.len < INLINE {
            self.inline[self.len] = (key, value);
            self.len += 1;
        } else {
            let mut map = PtrMap::with_capacity_and_hasher(INLINE * 4, Default::default());
            map.extend(self.inline[..self.len].iter().copied());
            map.insert(key, value);
            self.len = 0;
            self.spill = Some(map);
        }
    }

    /// The keys, in no particular order.
    pub fn keys(&self) -> impl Iterator<Item = usize> + '_ {
        let inline = if self.spill.is_none() {
            &self.inline[..self.len]
        } else {
            &[][..]
        };
        inline
            .iter()
            .map(|&(k, _)| k)
            .chain(self.spill.iter().flat_map(|map| map.keys().copied()))
    }

    pub fn is_empty(&self) -> bool {
        self.spill
            .as_ref()
            .map_or(self.len == 0, |map| map.is_empty())
    }

    pub fn remove(&mut self, key: &usize) -> Option<V> {
        if let Some(map) = &mut self.spill {
            return map.remove(key);
        }
        let i = self.position(*key)?;
        let value = self.inline[i].1;
        self.inline.copy_within(i + 1..self.len, i);
        self.len -= 1;
        Some(value)
    }
}

#[cfg(test)]
mod tests {
    use super::SmallPtrMap;

    #[test]
    fn behaves_as_a_map_across_the_spill() {
        let mut map = SmallPtrMap::<u32>::default();
        let mut model = std::collections::HashMap::new();
        for step in 0..200usize {
            let key = (step * 7919) % 53 * 16 + 16;
            match step % 5 {
                0..=2 => {
                    map.insert(key, step as u32);
                    model.insert(key, step as u32);
                }
                3 => assert_eq!(map.remove(&key), model.remove(&key)),
                _ => {
                    if let Some(v) = map.get_mut(&key) {
                        *v += 1;
                        *model.get_mut(&key).unwrap() += 1;
                    }
                }
            }
            for probe in (16..53 * 16 + 16).step_by(16) {
                assert_eq!(map.get(&probe), model.get(&probe));
            }
        }
    }
}
