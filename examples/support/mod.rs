//! What every example shares: a check of what it showed. An example that prints a claim also
//! checks it, and exits non-zero when it does not hold (`.ci/run` runs every example).

use std::error::Error;

/// `Ok` when `holds`, else an error naming the claim that failed.
pub fn check(holds: bool, claim: &str) -> Result<(), Box<dyn Error>> {
    if holds {
        println!("  ✓ {claim}");
        Ok(())
    } else {
        Err(format!("check failed: {claim}").into())
    }
}
