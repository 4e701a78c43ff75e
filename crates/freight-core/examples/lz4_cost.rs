//! Measures what lz4 (with and without byte-shuffle) costs per byte on data of different
//! compressibility, on one core: the source of the constants in `compress::auto_cost`.
//! Run: `RAYON_NUM_THREADS=1 cargo run --release -p freight-core --example lz4_cost`.

use std::time::Instant;

use freight_core::compress::{compress, Algorithm};

fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

fn main() {
    const N: usize = 1 << 20;
    let mut s = 0x9e3779b97f4a7c15u64;
    let mut cases: Vec<(&str, Vec<u8>, Option<usize>)> = Vec::new();
    cases.push(("zeros", vec![0u8; N], Some(8)));
    let small: Vec<u8> = (0..N / 8)
        .flat_map(|_| (xorshift(&mut s) % 1000).to_le_bytes())
        .collect();
    cases.push(("int64 0..1000", small.clone(), Some(8)));
    cases.push(("int64 0..1000 unshuffled", small, None));
    let floats: Vec<u8> = (0..N / 8)
        .flat_map(|_| ((xorshift(&mut s) >> 11) as f64 / (1u64 << 53) as f64).to_le_bytes())
        .collect();
    cases.push(("random float64", floats.clone(), Some(8)));
    cases.push(("random float64 unshuffled", floats, None));
    let text: Vec<u8> = (0..N)
        .map(|i| {
            b"the quick brown fox jumps over the lazy dog "
                [(i * 7 + (xorshift(&mut s) % 3) as usize) % 44]
        })
        .collect();
    cases.push(("text-like", text, None));
    let random: Vec<u8> = (0..N).map(|_| xorshift(&mut s) as u8).collect();
    cases.push(("random bytes", random, None));
    let half: Vec<u8> = (0..N)
        .map(|i| if i < N / 2 { xorshift(&mut s) as u8 } else { 0 })
        .collect();
    cases.push(("half noise, half zeros", half, None));
    println!("{:<28} {:>7} {:>9}", "case", "ratio", "ns/byte");
    for (name, data, shuffle) in &cases {
        let mut best = f64::MAX;
        let mut ratio = 0.0;
        for _ in 0..30 {
            let t = Instant::now();
            let out = compress(Algorithm::Lz4, data, *shuffle);
            best = best.min(t.elapsed().as_secs_f64());
            ratio = out.len() as f64 / data.len() as f64;
        }
        println!(
            "{name:<28} {ratio:>7.3} {:>9.3}",
            best * 1e9 / data.len() as f64
        );
    }
}
