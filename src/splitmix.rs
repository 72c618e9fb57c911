//! splitmix64: a small, fast, deterministic generator for the fault-schedule simulation
//! (guard::sim) and the hostile-input tests. The same seed gives the same sequence on every
//! machine, so a failing seed replays exactly. Not for anything that needs real randomness.

pub struct SplitMix64(pub u64);

impl SplitMix64 {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}
