//! The inner loops, compiled more than once: portable, with AVX2/FMA/POPCNT,
//! and (the scan of a list's blocked codes, and the row-by-row distances of
//! 6-word codes) with AVX-512 (VPOPCNTDQ, and BW and VBMI for the latter), for
//! CPUs that have them (detected at run time; the workspace builds for
//! baseline x86-64, whose `count_ones` is a dozen instructions and whose
//! vector width is SSE2).
//!
//! This is the lowest layer of the vector search: it knows slices of `f32`
//! and `u64`, nothing of tenants, rows or IO. Every `unsafe` block here is a
//! SIMD intrinsic or a call into a `#[target_feature]` function after the
//! feature was detected, each with its SAFETY comment.

/// Rows per block of a partition list's sign codes: one 512-bit load holds
/// one code word of this many rows (see `List::codes` in `partitions.rs`).
pub(crate) const CODE_BLOCK_ROWS: usize = 8;

pub(crate) type Dot = fn(&[f32], &[f32]) -> f32;
pub(crate) type Hamming = fn(&[u64], &[u64], &mut [u32]);
/// Reports the rows of row-major `codes` (`q.len()` words a row) whose
/// distance to `q` is below `below`: `near(row, distance)`, in row order.
/// A pass over every row keeps a few thousand of millions: comparing eight
/// distances at once and handing on only those rows spares the per-row
/// writes, reads and branches of a pass that stores every distance.
pub(crate) type HammingBelow = fn(codes: &[u64], q: &[u64], below: u32, near: Near<'_>);
/// Where [`HammingBelow`] reports a row.
pub(crate) type Near<'a> = &'a mut dyn FnMut(usize, u32);

#[inline(always)]
fn dot_portable(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 16];
    let (ca, cb) = (a.chunks_exact(16), b.chunks_exact(16));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for i in 0..16 {
            acc[i] += x[i] * y[i];
        }
    }
    acc.iter().sum::<f32>() + tail
}

#[inline(always)]
fn hamming_portable(codes: &[u64], q: &[u64], out: &mut [u32]) {
    for (code, d) in codes.chunks_exact(q.len()).zip(out.iter_mut()) {
        *d = code.iter().zip(q).map(|(a, b)| (a ^ b).count_ones()).sum();
    }
}

/// [`HammingBelow`] over any distance loop: distances of a stretch of rows
/// into a buffer on the stack, then the rows below `below` reported.
#[inline(always)]
fn hamming_below_with(
    hamming: impl Fn(&[u64], &[u64], &mut [u32]),
    codes: &[u64],
    q: &[u64],
    below: u32,
    near: Near<'_>,
) {
    const STRETCH: usize = 256;
    if q.is_empty() {
        return;
    }
    let mut out = [0u32; STRETCH];
    for (s, codes) in codes.chunks(STRETCH * q.len()).enumerate() {
        let out = &mut out[..codes.len() / q.len()];
        hamming(codes, q, out);
        for (i, d) in out.iter().enumerate() {
            if *d < below {
                near(s * STRETCH + i, *d);
            }
        }
    }
}

fn hamming_below_portable(codes: &[u64], q: &[u64], below: u32, near: Near<'_>) {
    hamming_below_with(hamming_portable, codes, q, below, near)
}

/// Asks the CPU to start loading `v` into cache, a 64-byte line at a
/// time: a hint that never faults and changes no result.
#[inline(always)]
pub(crate) fn prefetch(v: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    for line in v.chunks(16) {
        // SAFETY: a prefetch reads nothing and cannot fault, and the
        // address is inside `v`; SSE is part of every x86_64 CPU.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                line.as_ptr().cast(),
            )
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = v;
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn dot_avx2(a: &[f32], b: &[f32]) -> f32 {
    dot_portable(a, b)
}

/// [`hamming_portable`] for codes of exactly `W` words: the per-row
/// loop unrolls, which roughly halves its cost.
#[inline(always)]
fn hamming_words<const W: usize>(codes: &[u64], q: &[u64; W], out: &mut [u32]) {
    for (code, d) in codes.chunks_exact(W).zip(out.iter_mut()) {
        let mut sum = 0;
        for i in 0..W {
            sum += (code[i] ^ q[i]).count_ones();
        }
        *d = sum;
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt")]
fn hamming_popcnt(codes: &[u64], q: &[u64], out: &mut [u32]) {
    // 384 dimensions (the default model) are 6 words, 768 are 12.
    if let Ok(q) = <&[u64; 6]>::try_from(q) {
        hamming_words(codes, q, out)
    } else if let Ok(q) = <&[u64; 12]>::try_from(q) {
        hamming_words(codes, q, out)
    } else {
        hamming_portable(codes, q, out)
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt")]
fn hamming_below_popcnt(codes: &[u64], q: &[u64], below: u32, near: Near<'_>) {
    hamming_below_with(|c, q, o| hamming_popcnt(c, q, o), codes, q, below, near)
}

/// [`hamming_popcnt`] with AVX-512 for the default model's codes (6 words
/// a row); other widths go to [`hamming_popcnt`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vpopcntdq,popcnt")]
fn hamming_avx512(codes: &[u64], q: &[u64], out: &mut [u32]) {
    match <&[u64; 6]>::try_from(q) {
        Ok(q) => hamming_six_avx512(codes, q, out),
        Err(_) => hamming_popcnt(codes, q, out),
    }
}

/// [`hamming_below_popcnt`] with AVX-512 for 6-word codes: each block's
/// eight distances are compared with `below` at once, and only a block
/// holding a row below it is looked at lane by lane.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vpopcntdq,popcnt")]
fn hamming_below_avx512(codes: &[u64], q: &[u64], below: u32, near: Near<'_>) {
    use std::arch::x86_64::*;
    let Ok(q6) = <&[u64; 6]>::try_from(q) else {
        return hamming_below_with(|c, q, o| hamming_popcnt(c, q, o), codes, q, below, near);
    };
    let bound = _mm512_set1_epi64(i64::from(below));
    let done = six_word_sums(codes, q6, usize::MAX, |block, sums| {
        let mut mask = _mm512_cmplt_epu64_mask(sums, bound);
        if mask == 0 {
            return;
        }
        let mut d = [0u64; 8];
        // SAFETY: `d` is 8 `u64`s, 64 bytes.
        unsafe { _mm512_storeu_si512(d.as_mut_ptr().cast(), sums) };
        while mask != 0 {
            let lane = mask.trailing_zeros() as usize;
            near(8 * block + lane, d[lane] as u32);
            mask &= mask - 1;
        }
    });
    let rest = &mut |row: usize, d: u32| near(done + row, d);
    hamming_below_with(
        |c, q, o| hamming_popcnt(c, q, o),
        &codes[done * 6..],
        q,
        below,
        rest,
    );
}

/// Eight rows of 6-word codes at a time, for at most `max_rows` rows.
/// Their 48 words are six 512-bit
/// loads (a load holds a row and a third, so the query's words repeat
/// every three loads); each load's 64-bit bit counts (at most 64: a byte
/// each) are gathered by byte permutes into eight 8-byte groups, a row's
/// six counts in its group and two zero bytes, and one sum of absolute
/// differences against zero adds each group: `each(block, sums)` gets the
/// eight distances as 64-bit lanes. The
/// row-by-row loop counted one word per instruction, and in a pass over
/// every row of a large tenant that loop was most of recall's vector
/// stage. Returns the rows done (whole blocks of eight).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vpopcntdq,popcnt")]
#[inline]
fn six_word_sums<F>(codes: &[u64], q: &[u64; 6], max_rows: usize, mut each: F) -> usize
where
    F: FnMut(usize, std::arch::x86_64::__m512i),
{
    use std::arch::x86_64::*;
    const W: usize = 6;
    const ROWS: usize = 8;
    let load = |words: &[u64; 8]| {
        // SAFETY: reads the 64 bytes of `words`.
        unsafe { _mm512_loadu_si512(words.as_ptr().cast()) }
    };
    // Load `i` of eight rows holds words 8i..8i+8, which are query words
    // (8i + lane) % 6: the same for loads i and i + 3.
    let queries: [__m512i; 3] =
        std::array::from_fn(|i| load(&std::array::from_fn(|lane| q[(8 * i + lane) % W])));
    // For each pair of loads (2p, 2p + 1): output byte 8r + j (j < 6)
    // takes the count of word g = 6r + j when that word is in the pair:
    // byte 8 · (g % 8) of the pair's first (index < 64) or second load.
    let mut index = [[0u8; 64]; 3];
    let mut masks = [0u64; 3];
    for row in 0..ROWS {
        for j in 0..W {
            let g = W * row + j;
            let (pair, second) = (g / 16, (g / 8) % 2);
            index[pair][ROWS * row + j] = (64 * second + 8 * (g % 8)) as u8;
            masks[pair] |= 1u64 << (ROWS * row + j);
        }
    }
    let index: [__m512i; 3] = std::array::from_fn(|p| {
        // SAFETY: reads the 64 bytes of `index[p]`.
        unsafe { _mm512_loadu_si512(index[p].as_ptr().cast()) }
    });
    let blocks = (codes.len() / (W * ROWS)).min(max_rows / ROWS);
    for (b, block) in codes.chunks_exact(W * ROWS).take(blocks).enumerate() {
        let counts: [__m512i; 6] = std::array::from_fn(|i| {
            // SAFETY: `block` holds 48 words, so words 8i..8i+8 (i < 6).
            let words = unsafe { _mm512_loadu_si512(block.as_ptr().add(8 * i).cast()) };
            _mm512_popcnt_epi64(_mm512_xor_si512(words, queries[i % 3]))
        });
        let mut bytes = _mm512_setzero_si512();
        for p in 0..3 {
            let gathered = _mm512_maskz_permutex2var_epi8(
                masks[p],
                counts[2 * p],
                index[p],
                counts[2 * p + 1],
            );
            bytes = _mm512_add_epi8(bytes, gathered);
        }
        each(b, _mm512_sad_epu8(bytes, _mm512_setzero_si512()));
    }
    blocks * ROWS
}

/// The row-by-row distances of 6-word codes ([`six_word_sums`]).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vpopcntdq,popcnt")]
fn hamming_six_avx512(codes: &[u64], q: &[u64; 6], out: &mut [u32]) {
    use std::arch::x86_64::*;
    let done = six_word_sums(codes, q, out.len(), |b, sums| {
        let d = &mut out[8 * b..8 * b + 8];
        // SAFETY: `d` is 8 `u32`s, 32 bytes.
        unsafe { _mm256_storeu_si256(d.as_mut_ptr().cast(), _mm512_cvtepi64_epi32(sums)) };
    });
    hamming_words(&codes[done * 6..], q, &mut out[done..]);
}

/// Reports, query by query, the rows of a list (codes in blocks, see
/// `List::codes`) within `limit` of each query: `found(query, position,
/// distance)`, in position order for each query.
pub(crate) type BlockScan =
    fn(codes: &[u64], rows: usize, queries: &[&[u64]], limit: u32, found: Found<'_>);
/// Where [`BlockScan`] reports a row.
pub(crate) type Found<'a> = &'a mut dyn FnMut(usize, usize, u32);

#[inline(always)]
fn scan_blocks_portable(
    codes: &[u64],
    rows: usize,
    queries: &[&[u64]],
    limit: u32,
    found: Found<'_>,
) {
    let Some(words) = queries.first().map(|q| q.len()) else {
        return;
    };
    let blocks = codes
        .chunks_exact(CODE_BLOCK_ROWS * words)
        .take(rows.div_ceil(CODE_BLOCK_ROWS));
    for (b, block) in blocks.enumerate() {
        let lanes = (rows - b * CODE_BLOCK_ROWS).min(CODE_BLOCK_ROWS);
        for (query, q) in queries.iter().enumerate() {
            let mut distance = [0u32; CODE_BLOCK_ROWS];
            for (k, word) in q.iter().enumerate() {
                let codes = &block[k * CODE_BLOCK_ROWS..(k + 1) * CODE_BLOCK_ROWS];
                for (d, code) in distance.iter_mut().zip(codes) {
                    *d += (code ^ word).count_ones();
                }
            }
            for (lane, d) in distance.iter().enumerate().take(lanes) {
                if *d <= limit {
                    found(query, b * CODE_BLOCK_ROWS + lane, *d);
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt")]
fn scan_blocks_popcnt(
    codes: &[u64],
    rows: usize,
    queries: &[&[u64]],
    limit: u32,
    found: Found<'_>,
) {
    scan_blocks_portable(codes, rows, queries, limit, found)
}

/// Four queries at a time: each 512-bit load of codes (one word of
/// eight rows) is compared with four queries, so the loop is bound by
/// the bit counts rather than by the loads.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vpopcntdq")]
fn scan_blocks_avx512(
    codes: &[u64],
    rows: usize,
    queries: &[&[u64]],
    limit: u32,
    found: Found<'_>,
) {
    let Some(words) = queries.first().map(|q| q.len()) else {
        return;
    };
    if words == 6 {
        scan_groups::<6>(codes, rows, queries, limit, found);
    } else if words == 12 {
        scan_groups::<12>(codes, rows, queries, limit, found);
    } else {
        scan_blocks_portable(codes, rows, queries, limit, found);
    }
}

/// [`scan_blocks_avx512`] for codes of `W` words (384 dimensions are 6,
/// 768 are 12): the loops unroll and the queries' words stay in registers.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vpopcntdq")]
fn scan_groups<const W: usize>(
    codes: &[u64],
    rows: usize,
    queries: &[&[u64]],
    limit: u32,
    found: Found<'_>,
) {
    let words = |q: &&[u64]| <[u64; W]>::try_from(*q).ok();
    let Some(queries) = queries.iter().map(words).collect::<Option<Vec<[u64; W]>>>() else {
        return scan_blocks_portable(codes, rows, queries, limit, found);
    };
    let blocks = rows
        .div_ceil(CODE_BLOCK_ROWS)
        .min(codes.len() / (CODE_BLOCK_ROWS * W));
    let mut groups = queries.chunks_exact(4);
    for (g, group) in groups.by_ref().enumerate() {
        if let Ok(group) = <&[[u64; W]; 4]>::try_from(group) {
            scan_group::<W, 4>(codes, blocks, rows, group, 4 * g, limit, found);
        }
    }
    let rest = groups.remainder();
    let first = queries.len() - rest.len();
    for (j, q) in rest.iter().enumerate() {
        scan_group::<W, 1>(codes, blocks, rows, &[*q], first + j, limit, found);
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vpopcntdq")]
fn scan_group<const W: usize, const Q: usize>(
    codes: &[u64],
    blocks: usize,
    rows: usize,
    group: &[[u64; W]; Q],
    first: usize,
    limit: u32,
    found: Found<'_>,
) {
    use std::arch::x86_64::*;
    let within = _mm512_set1_epi64(i64::from(limit));
    // Word k of every query of the group, each in all eight lanes.
    let q: [[__m512i; Q]; W] =
        std::array::from_fn(|k| std::array::from_fn(|j| _mm512_set1_epi64(group[j][k] as i64)));
    for (b, block) in codes
        .chunks_exact(CODE_BLOCK_ROWS * W)
        .take(blocks)
        .enumerate()
    {
        let mut acc = [_mm512_setzero_si512(); Q];
        for (k, words) in q.iter().enumerate() {
            // SAFETY: `block` holds CODE_BLOCK_ROWS (8) words from k * 8 on.
            let w = unsafe { _mm512_loadu_si512(block.as_ptr().add(k * CODE_BLOCK_ROWS).cast()) };
            for (acc, word) in acc.iter_mut().zip(words) {
                let bits = _mm512_popcnt_epi64(_mm512_xor_si512(w, *word));
                *acc = _mm512_add_epi64(*acc, bits);
            }
        }
        // Lanes past the list's last row are padding.
        let lanes = (rows - b * CODE_BLOCK_ROWS).min(CODE_BLOCK_ROWS);
        let valid = (((1u16 << lanes) - 1) & 0xFF) as u8;
        for (j, acc) in acc.iter().enumerate() {
            let mut mask = _mm512_mask_cmple_epu64_mask(valid, *acc, within);
            if mask == 0 {
                continue;
            }
            let mut d = [0u64; CODE_BLOCK_ROWS];
            // SAFETY: `d` is 64 bytes.
            unsafe { _mm512_storeu_si512(d.as_mut_ptr().cast(), *acc) };
            while mask != 0 {
                let lane = mask.trailing_zeros() as usize;
                found(first + j, b * CODE_BLOCK_ROWS + lane, d[lane] as u32);
                mask &= mask - 1;
            }
        }
    }
}

/// The fastest scan of a list's blocked codes this CPU runs.
pub(crate) fn scan_blocks_fn() -> BlockScan {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512vpopcntdq")
    {
        // SAFETY: only called on a CPU with these features, checked just above.
        return |c, r, q, l, f| unsafe { scan_blocks_avx512(c, r, q, l, f) };
    }
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("popcnt") {
        // SAFETY: only called on a CPU with POPCNT, checked just above.
        return |c, r, q, l, f| unsafe { scan_blocks_popcnt(c, r, q, l, f) };
    }
    scan_blocks_portable
}

/// The fastest dot product this CPU runs.
pub(crate) fn dot_fn() -> Dot {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
        // SAFETY: only called on a CPU with AVX2 and FMA, checked just above.
        return |a, b| unsafe { dot_avx2(a, b) };
    }
    dot_portable
}

/// Whether this CPU runs the AVX-512 loops over row-major codes (byte
/// permutes, bit counts of 64-bit lanes).
#[cfg(target_arch = "x86_64")]
fn has_avx512_counts() -> bool {
    std::is_x86_feature_detected!("avx512f")
        && std::is_x86_feature_detected!("avx512bw")
        && std::is_x86_feature_detected!("avx512vbmi")
        && std::is_x86_feature_detected!("avx512vpopcntdq")
        && std::is_x86_feature_detected!("popcnt")
}

/// The fastest Hamming-distance loop this CPU runs.
pub(crate) fn hamming_fn() -> Hamming {
    #[cfg(target_arch = "x86_64")]
    if has_avx512_counts() {
        // SAFETY: only called on a CPU with these features, checked just above.
        return |c, q, o| unsafe { hamming_avx512(c, q, o) };
    }
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("popcnt") {
        // SAFETY: only called on a CPU with POPCNT, checked just above.
        return |c, q, o| unsafe { hamming_popcnt(c, q, o) };
    }
    hamming_portable
}

/// The fastest [`HammingBelow`] this CPU runs.
pub(crate) fn hamming_below_fn() -> HammingBelow {
    #[cfg(target_arch = "x86_64")]
    if has_avx512_counts() {
        // SAFETY: only called on a CPU with these features, checked just above.
        return |c, q, b, n| unsafe { hamming_below_avx512(c, q, b, n) };
    }
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("popcnt") {
        // SAFETY: only called on a CPU with POPCNT, checked just above.
        return |c, q, b, n| unsafe { hamming_below_popcnt(c, q, b, n) };
    }
    hamming_below_portable
}

#[cfg(test)]
mod tests {
    #[test]
    fn kernels_agree_with_the_portable_loops() {
        let a: Vec<f32> = (0..389).map(|i| (i as f32 * 0.37).sin()).collect();
        let b: Vec<f32> = (0..389).map(|i| (i as f32 * 0.11).cos()).collect();
        let plain: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert!((super::dot_fn()(&a, &b) - plain).abs() < 1e-3);
        let codes = [u64::MAX, 0, 0b1011, 7];
        let mut out = [0u32; 2];
        super::hamming_fn()(&codes, &[0, 0], &mut out);
        assert_eq!(out, [64, 6]);
        // The unrolled widths agree with the plain loop.
        for words in [6, 12] {
            let codes: Vec<u64> = (0..words as u64 * 5)
                .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15))
                .collect();
            let q: Vec<u64> = (0..words as u64).map(|i| i * 0x0123_4567).collect();
            let (mut fast, mut plain) = (vec![0u32; 5], vec![0u32; 5]);
            super::hamming_fn()(&codes, &q, &mut fast);
            super::hamming_portable(&codes, &q, &mut plain);
            assert_eq!(fast, plain, "{words} words");
        }
    }

    /// `rows` codes of `words` words with bits spread over every word, and
    /// a query of as many words.
    fn scattered_codes(words: usize, rows: usize) -> (Vec<u64>, Vec<u64>) {
        let codes = (0..(words * rows) as u64)
            .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29) ^ (i << 3))
            .collect();
        let q = (0..words as u64).map(|i| !(i * 0x0F0F_1234_5678)).collect();
        (codes, q)
    }

    #[test]
    fn six_word_codes_count_alike_for_every_number_of_rows() {
        // Eight rows at a time in the AVX-512 loop, the rest row by row:
        // every count of rows from none to three blocks and a part, and an
        // output shorter than the codes.
        let (codes, q) = scattered_codes(6, 29);
        for rows in 0..=29 {
            let (mut fast, mut plain) = (vec![0u32; rows], vec![0u32; rows]);
            super::hamming_fn()(&codes[..6 * rows], &q, &mut fast);
            super::hamming_portable(&codes[..6 * rows], &q, &mut plain);
            assert_eq!(fast, plain, "{rows} rows");
        }
        let (mut fast, mut plain) = (vec![0u32; 13], vec![0u32; 13]);
        super::hamming_fn()(&codes, &q, &mut fast);
        super::hamming_portable(&codes, &q, &mut plain);
        assert_eq!(fast, plain, "13 of 29 rows asked");
    }

    #[test]
    fn rows_below_a_distance_are_those_the_distances_say() {
        // 6-word codes (eight rows at a time with AVX-512, the rest row by
        // row) and 5-word ones (row by row), every count of rows from none
        // to three blocks and a part, bounds from none kept to all kept.
        for words in [6usize, 5] {
            let (codes, q) = scattered_codes(words, 29);
            let mut all = vec![0u32; 29];
            super::hamming_portable(&codes, &q, &mut all);
            let mut sorted = all.clone();
            sorted.sort_unstable();
            for rows in 0..=29 {
                for below in [0, sorted[3], sorted[14], sorted[28] + 1] {
                    let mut found = Vec::new();
                    super::hamming_below_fn()(&codes[..words * rows], &q, below, &mut |r, d| {
                        found.push((r, d))
                    });
                    let expected: Vec<(usize, u32)> = all[..rows]
                        .iter()
                        .enumerate()
                        .filter(|(_, d)| **d < below)
                        .map(|(r, d)| (r, *d))
                        .collect();
                    assert_eq!(found, expected, "{words} words, {rows} rows, below {below}");
                }
            }
        }
    }

    #[test]
    fn a_blocked_list_scan_reports_the_rows_a_row_by_row_scan_keeps() {
        use crate::partitions::List;
        let mix = |i: u64| i.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17) ^ (i * 31);
        for (words, rows) in [(6, 29), (6, 8), (12, 13), (1, 3)] {
            let codes: Vec<u64> = (0..(words * rows) as u64).map(mix).collect();
            let mut list = List::default();
            for row in 0..rows {
                list.push(row as u32, &codes[row * words..(row + 1) * words]);
            }
            // Nine queries: two groups of four and one left over.
            let queries: Vec<Vec<u64>> = (0..9u64)
                .map(|q| (0..words as u64).map(|k| mix(1_000 + q * 97 + k)).collect())
                .collect();
            let refs: Vec<&[u64]> = queries.iter().map(Vec::as_slice).collect();
            let limit = (words * 64 / 2) as u32;
            let mut want = Vec::new();
            for (query, q) in refs.iter().enumerate() {
                let mut out = vec![0u32; rows];
                super::hamming_portable(&codes, q, &mut out);
                for (at, d) in out.iter().enumerate() {
                    if *d <= limit {
                        want.push((query, at, *d));
                    }
                }
            }
            assert!(!want.is_empty() && want.len() < rows * refs.len());
            for scan in [super::scan_blocks_fn(), super::scan_blocks_portable] {
                let mut got = Vec::new();
                scan(&list.codes, rows, &refs, limit, &mut |q, at, d| {
                    got.push((q, at, d))
                });
                // Positions come in order for each query.
                got.sort_by_key(|(q, _, _)| *q);
                assert_eq!(got, want, "{words} words, {rows} rows");
            }
        }
    }

    mod agree {
        use proptest::prelude::*;

        use crate::partitions::List;

        proptest! {
            /// The CPU's fastest dot product is the portable one, to rounding.
            #[test]
            fn dot(pairs in proptest::collection::vec((-1.0f32..1.0, -1.0f32..1.0), 0..800)) {
                let (a, b): (Vec<f32>, Vec<f32>) = pairs.into_iter().unzip();
                let plain: f64 = a.iter().zip(&b).map(|(x, y)| f64::from(*x) * f64::from(*y)).sum();
                let fast = f64::from(super::super::dot_fn()(&a, &b));
                let portable = f64::from(super::super::dot_portable(&a, &b));
                prop_assert!((fast - plain).abs() < 1e-3, "{fast} vs {plain}");
                prop_assert!((fast - portable).abs() < 1e-4, "{fast} vs {portable}");
            }

            /// Every width of code, unrolled or not, counts the same bits.
            #[test]
            fn hamming(words in 1usize..14, rows in 1usize..20, seed in any::<u64>()) {
                let mix = |i: u64| (i ^ seed).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(23);
                let codes: Vec<u64> = (0..(words * rows) as u64).map(mix).collect();
                let q: Vec<u64> = (0..words as u64).map(|i| mix(i + 10_000)).collect();
                let (mut fast, mut plain) = (vec![0u32; rows], vec![0u32; rows]);
                super::super::hamming_fn()(&codes, &q, &mut fast);
                super::super::hamming_portable(&codes, &q, &mut plain);
                prop_assert_eq!(fast, plain);
            }

            /// The blocked list scan (AVX-512 where the CPU has it) reports
            /// exactly what the portable scan reports, for any limit.
            #[test]
            fn blocked_scan(
                words in prop_oneof![Just(6usize), Just(12usize), 1usize..14],
                rows in 1usize..40,
                queries in 1usize..10,
                limit_share in 0.0f64..1.0,
                seed in any::<u64>(),
            ) {
                let mix = |i: u64| (i ^ seed).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17);
                let mut list = List::default();
                for row in 0..rows {
                    let code: Vec<u64> = (0..words).map(|k| mix((row * words + k) as u64)).collect();
                    list.push(row as u32, &code);
                }
                let queries: Vec<Vec<u64>> = (0..queries as u64)
                    .map(|q| (0..words as u64).map(|k| mix(50_000 + q * 131 + k)).collect())
                    .collect();
                let refs: Vec<&[u64]> = queries.iter().map(Vec::as_slice).collect();
                let limit = (limit_share * (words * 64) as f64) as u32;
                let run = |scan: super::super::BlockScan| {
                    let mut got = Vec::new();
                    scan(&list.codes, rows, &refs, limit, &mut |q, at, d| got.push((q, at, d)));
                    got.sort_unstable();
                    got
                };
                prop_assert_eq!(run(super::super::scan_blocks_fn()), run(super::super::scan_blocks_portable));
            }
        }
    }
}
