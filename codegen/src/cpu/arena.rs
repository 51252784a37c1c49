//! The CPU backend's arena: one block of host memory every intermediate, input and output lives
//! in while a plan runs.
//!
//! Guarantees: the arena is exactly the planned size, its base is [`ARENA_ALIGN`]-aligned and
//! every byte starts zero; pages no run writes cost no memory (an anonymous mapping, backed on
//! first touch); an arena the machine cannot map is an error, never an abort.

use crate::backend::{BackendError, ARENA_ALIGN};
use std::ptr::NonNull;

/// A well-aligned type whose dangling pointer stands in for the base of an empty arena.
#[repr(C, align(64))]
struct Aligned([u8; ARENA_ALIGN]);

/// The arena of one loaded program.
pub(crate) struct HostArena {
    /// An anonymous private mapping: page-aligned, zero-filled, and backed by memory only where
    /// a run writes (the kernel maps a zero page on first touch). `None` when empty.
    map: Option<memmap2::MmapMut>,
    /// The planned size (the mapping rounds up to whole pages).
    len: usize,
}

impl HostArena {
    pub(crate) fn new(bytes: u64) -> Result<HostArena, BackendError> {
        if bytes == 0 {
            return Ok(HostArena { map: None, len: 0 });
        }
        let len = usize::try_from(bytes).map_err(|_| BackendError::Arena { bytes })?;
        // Not `alloc_zeroed`: for alignments above 16 the system allocator zeroes with memset,
        // which makes every arena page resident at load instead of at its first write.
        let map = memmap2::MmapMut::map_anon(len).map_err(|_| BackendError::Arena { bytes })?;
        Ok(HostArena {
            map: Some(map),
            len,
        })
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn ptr(&mut self) -> *mut u8 {
        match &mut self.map {
            Some(map) => map.as_mut_ptr(),
            None => NonNull::<Aligned>::dangling().cast().as_ptr(),
        }
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        match &self.map {
            Some(map) => &map[..self.len],
            None => &[],
        }
    }

    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        let len = self.len;
        match &mut self.map {
            Some(map) => &mut map[..len],
            None => &mut [],
        }
    }
}

// SAFETY: the arena owns its memory outright; the raw pointer is not shared with anything.
unsafe impl Send for HostArena {}
// SAFETY: shared access only reads.
unsafe impl Sync for HostArena {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arenas_are_aligned_and_zeroed() {
        for bytes in [0u64, 1, 63, 4096, 1 << 20] {
            let mut arena = HostArena::new(bytes).unwrap();
            assert_eq!(arena.len() as u64, bytes);
            assert_eq!(arena.ptr() as usize % ARENA_ALIGN, 0);
            assert!(arena.bytes().iter().all(|&b| b == 0));
        }
    }

    #[test]
    fn an_arena_too_large_for_memory_is_an_error() {
        let err = HostArena::new(u64::MAX).err().unwrap();
        assert_eq!(
            err.to_string(),
            "cannot allocate the arena of 18446744073709551615 bytes"
        );
    }
}
