//! Ids: run ids (short, lowercase, DNS-label-safe, the same in every process
//! of a run; public through [`crate::run`], `testkit-runner` makes its ids
//! here) and random ids for private names.

/// Length of a generated run id.
pub const RUN_ID_LEN: usize = 10;

/// Whether `id` can be a run id: it must fit inside DNS labels together with
/// a prefix and a test tag. The error says what is wrong.
pub fn validate_run_id(id: &str) -> Result<(), &'static str> {
    if id.is_empty() || id.len() > 16 {
        return Err("it must be 1 to 16 characters long");
    }
    if !id
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    {
        return Err("it must contain only lowercase ASCII letters and digits");
    }
    Ok(())
}

/// A new random run id of [`RUN_ID_LEN`] characters.
pub fn generate_run_id() -> String {
    let mut seed = [0u8; 16];
    getrandom::fill(&mut seed).expect("the operating system's random source failed");
    run_id_from_seed(&seed)
}

/// Deterministic: the same seed (nextest's run id) gives every process of a
/// run the same short id.
pub(crate) fn run_id_from_seed(seed: &[u8]) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    // FNV-1a, twice with different offsets, for 128 bits of mixing.
    let mut hash: u128 = 0x6c62272e07bb014262b821756295c58d;
    for &b in seed {
        hash ^= u128::from(b);
        hash = hash.wrapping_mul(0x0000000001000000000000000000013b);
    }
    let mut id = String::with_capacity(RUN_ID_LEN);
    // The first character is a letter so the id never looks like a number.
    id.push(ALPHABET[(hash % 26) as usize] as char);
    hash /= 26;
    for _ in 1..RUN_ID_LEN {
        id.push(ALPHABET[(hash % 36) as usize] as char);
        hash /= 36;
    }
    id
}

/// `len` random lowercase letters and digits.
pub(crate) fn random_id(len: usize) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut bytes = vec![0u8; len];
    getrandom::fill(&mut bytes).expect("the operating system's random source failed");
    bytes
        .iter()
        .map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_ids_are_stable_and_dns_safe() {
        let a = run_id_from_seed(b"5a7c1f4e-0000-4000-8000-000000000000");
        assert_eq!(a, run_id_from_seed(b"5a7c1f4e-0000-4000-8000-000000000000"));
        assert_ne!(a, run_id_from_seed(b"5a7c1f4e-0000-4000-8000-000000000001"));
        assert_eq!(a.len(), RUN_ID_LEN);
        assert!(validate_run_id(&a).is_ok());
        assert!(a.as_bytes()[0].is_ascii_lowercase());
    }

    #[test]
    fn generated_ids_differ() {
        assert_ne!(generate_run_id(), generate_run_id());
    }

    #[test]
    fn run_id_validation_names_the_problem() {
        assert!(validate_run_id("").is_err());
        assert!(validate_run_id("ABC").unwrap_err().contains("lowercase"));
        assert!(validate_run_id("a-b").is_err());
        assert!(validate_run_id(&"a".repeat(17)).unwrap_err().contains("16"));
        assert!(validate_run_id("abc123").is_ok());
    }
}
