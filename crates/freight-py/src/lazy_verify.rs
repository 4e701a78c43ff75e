//! Checking the frames a lazy read uses, on all cores. A whole load checks a table's frames side
//! by side on all cores (`Frames::verify_many`), but one column is one frame of a few megabytes,
//! which the payload's own rules check on one core (their parallel paths start at 8 MiB per
//! frame, or 32 MiB over several): a lazy read of one column of ten took 0.26× the time of the
//! whole load, most of it that check. Here every unit of work of every frame asked for (a run of
//! digest blocks, a 1 MiB block of a block checksum, a small frame's checksum) is one job of one
//! parallel pass, with the same errors as the payload's own checks.

use freight_core::checksum::{self, CHECKSUM_BLOCK};
use freight_core::{Error, Frame, Result};
use rayon::prelude::*;

use crate::decode::input::Input;

/// Bytes of digest blocks one job checks (whole blocks: at least one).
const JOB: usize = 1 << 20;

/// What one job found: the xxh3-64 of its bytes (a checksum's part), or nothing to report.
enum Found {
    Hash(u64),
    Checked,
}

/// Checks the stored bytes of these (index, frame) against their checksums and block digests,
/// on all cores; false, with nothing checked, when one of them is of a kind left to the
/// payload's own rules (compressed: checked before decompressing, as a whole load does).
pub(crate) fn check_frames(frames: &[(u32, &Frame<Input>)]) -> Result<bool> {
    if frames.iter().any(|(_, f)| f.compressed()) {
        return Ok(false);
    }
    // (frame's position, first block, bytes): digest runs, then checksum parts in order.
    let mut jobs: Vec<(usize, usize, &[u8], bool)> = Vec::new();
    for (at, (_, frame)) in frames.iter().enumerate() {
        let info = frame.info();
        let stored = frame.stored();
        if let Some(d) = info.digests {
            let block = d.scheme.block();
            let per_job = (JOB / block).max(1);
            for (i, run) in stored.chunks(block * per_job).enumerate() {
                jobs.push((at, i * per_job, run, true));
            }
        }
        if info.checksum.is_some() {
            if info.block_checksum {
                jobs.extend(stored.chunks(CHECKSUM_BLOCK).map(|b| (at, 0, b, false)));
            } else {
                jobs.push((at, 0, stored, false));
            }
        }
    }
    let found: Vec<Result<Found>> = freight_core::parallel::run(|| {
        jobs.par_iter()
            .map(|&(at, first, bytes, digests)| {
                let (index, frame) = frames[at];
                if digests {
                    frame.check_blocks(index as usize, first, bytes)?;
                    Ok(Found::Checked)
                } else {
                    Ok(Found::Hash(checksum::hash(bytes)))
                }
            })
            .collect()
    });
    // The first failure in frame order, as a check one frame at a time would report it.
    let mut parts: Vec<Vec<u64>> = vec![Vec::new(); frames.len()];
    for (&(at, _, _, _), found) in jobs.iter().zip(found) {
        if let Found::Hash(h) = found? {
            parts[at].push(h);
        }
    }
    for ((index, frame), hashes) in frames.iter().zip(parts) {
        let info = frame.info();
        let Some(stored) = info.checksum else {
            continue;
        };
        let computed = if info.block_checksum {
            // The checksum of a block-checksummed frame: the xxh3-64 of the little-endian
            // xxh3-64 digests of its 1 MiB blocks (docs/FORMAT.md).
            let digests: Vec<u8> = hashes.iter().flat_map(|h| h.to_le_bytes()).collect();
            checksum::hash(&digests)
        } else {
            hashes[0]
        };
        if computed != stored {
            return Err(Error::Checksum {
                what: format!("frame {index}"),
                stored,
                computed,
            });
        }
    }
    Ok(true)
}
