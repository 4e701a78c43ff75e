//! Applies the `compression=` policy to the frames of a payload being written: per frame, raw or
//! compressed (lz4/zstd in parallel blocks, byte-shuffled when that helps), never stored larger
//! than it is.

use freight_core::compress::{self, Algorithm, Decision};
use freight_core::envelope::FrameLayout;

use crate::options::Compression;

/// One frame as it will be stored.
pub struct StoredFrame {
    /// The compressed bytes; None: the frame is stored raw (its source bytes as they are).
    pub data: Option<Vec<u8>>,
    pub layout: FrameLayout,
}

fn compressed(algo: Algorithm, raw: &[u8], shuffle: Option<usize>) -> StoredFrame {
    let data = compress::compress(algo, raw, shuffle);
    if data.len() >= raw.len() {
        return StoredFrame {
            data: None,
            layout: FrameLayout::raw(raw.len() as u64),
        };
    }
    let layout = FrameLayout {
        raw_len: raw.len() as u64,
        stored_len: data.len() as u64,
        codec: algo.id(),
        shuffle: shuffle.map(|s| s as u32),
    };
    StoredFrame {
        data: Some(data),
        layout,
    }
}

/// Decides and compresses every frame (call it with the GIL released: it uses all cores).
pub fn apply(policy: Compression, frames: &[&[u8]], itemsizes: &[u32]) -> Vec<StoredFrame> {
    frames
        .iter()
        .zip(itemsizes)
        .map(|(&raw, &itemsize)| {
            let itemsize = (itemsize > 1).then_some(itemsize as usize);
            match policy {
                Compression::None => StoredFrame {
                    data: None,
                    layout: FrameLayout::raw(raw.len() as u64),
                },
                Compression::Fixed(algo) => {
                    let shuffle = itemsize.filter(|&size| compress::shuffle_helps(raw, size));
                    compressed(algo, raw, shuffle)
                }
                Compression::Auto { transport_speed } => {
                    match compress::decide(raw, itemsize, compress::AUTO_MIN, transport_speed) {
                        Decision::Raw => StoredFrame {
                            data: None,
                            layout: FrameLayout::raw(raw.len() as u64),
                        },
                        Decision::Compress { shuffle } => {
                            compressed(Algorithm::Lz4, raw, if shuffle { itemsize } else { None })
                        }
                    }
                }
            }
        })
        .collect()
}
