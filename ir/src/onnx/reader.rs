//! Decoding a model file without touching its weight bytes.
//!
//! Decoding from a memory map reads every protobuf header in place, and the kernel maps the
//! cached pages around each header into the process (large page-cache folios make that
//! megabytes per header), so the resident set grows with weight bytes nobody reads. Instead,
//! [`MappedBuf`] feeds prost through `pread` into a small window, and answers prost's request
//! for a large `bytes` field (a tensor's `raw_data`) with a slice of the memory map, which is
//! never read here. The import's resident set then holds only the decoded structure.

use bytes::{Buf, Bytes, BytesMut};
use std::fs::File;
use std::os::unix::fs::FileExt;

/// Payloads at least this long become slices of the map instead of being read.
const SLICE_THRESHOLD: usize = 4096;
/// How much of the file one `pread` fills.
const WINDOW: usize = 64 * 1024;

/// A [`Buf`] over a file: headers come from `pread`, large payloads from the map, unread.
pub struct MappedBuf<'a> {
    file: &'a File,
    map: &'a Bytes,
    /// The file offset of `window[0]`.
    window_start: u64,
    window: Vec<u8>,
    /// How much of `window` is consumed.
    consumed: usize,
    /// The length of the input; lowered to the failure point if a read fails.
    end: u64,
    error: Option<std::io::Error>,
}

impl<'a> MappedBuf<'a> {
    /// A buffer over `file`, whose whole-file map is `map`.
    pub fn new(file: &'a File, map: &'a Bytes) -> MappedBuf<'a> {
        let mut buf = MappedBuf {
            file,
            map,
            window_start: 0,
            window: Vec::with_capacity(WINDOW),
            consumed: 0,
            end: map.len() as u64,
            error: None,
        };
        buf.refill(0);
        buf
    }

    /// The read error that cut the input short, if any.
    pub fn take_error(&mut self) -> Option<std::io::Error> {
        self.error.take()
    }

    fn position(&self) -> u64 {
        self.window_start + self.consumed as u64
    }

    /// Fills the window from `pos`. A failed read ends the input there, so prost reports a
    /// truncated message instead of reading garbage.
    fn refill(&mut self, pos: u64) {
        self.window_start = pos;
        self.consumed = 0;
        let want = (self.end.saturating_sub(pos)).min(WINDOW as u64) as usize;
        self.window.resize(want, 0);
        let mut filled = 0;
        while filled < want {
            match self
                .file
                .read_at(&mut self.window[filled..], pos + filled as u64)
            {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.error = Some(e);
                    break;
                }
            }
        }
        if filled < want {
            self.window.truncate(filled);
            self.end = pos + filled as u64;
        }
    }
}

impl Buf for MappedBuf<'_> {
    fn remaining(&self) -> usize {
        self.end.saturating_sub(self.position()) as usize
    }

    fn chunk(&self) -> &[u8] {
        &self.window[self.consumed..]
    }

    fn advance(&mut self, cnt: usize) {
        let target = self.position() + cnt as u64;
        if self.consumed + cnt < self.window.len() {
            self.consumed += cnt;
        } else {
            self.refill(target.min(self.end));
        }
    }

    fn copy_to_bytes(&mut self, len: usize) -> Bytes {
        let start = self.position();
        let remaining = self.remaining();
        if len >= SLICE_THRESHOLD && len <= remaining {
            // Both bounds are within the map, whose length fits in usize.
            let slice = self.map.slice(start as usize..start as usize + len);
            self.refill(start + len as u64);
            return slice;
        }
        let len = len.min(remaining);
        let mut out = BytesMut::with_capacity(len);
        while out.len() < len {
            let chunk = self.chunk();
            if chunk.is_empty() {
                break;
            }
            let n = chunk.len().min(len - out.len());
            out.extend_from_slice(&chunk[..n]);
            self.advance(n);
        }
        out.freeze()
    }
}
