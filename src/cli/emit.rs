//! `nki emit`.

use clap::Args;
use std::path::PathBuf;

/// Arguments of `nki emit`.
#[derive(Args)]
pub struct EmitArgs {
    /// Directory to write the package into (created if missing).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
}

/// Writes the package of every registered kernel into `--out`.
pub fn run(args: &EmitArgs) -> Result<(), String> {
    let pkg = nki::emit::Package::new(&nki::registry()).map_err(|e| e.to_string())?;
    pkg.write_to(&args.out).map_err(|e| e.to_string())?;
    for name in pkg.files().keys() {
        outln!("{}", args.out.join(name).display());
    }
    Ok(())
}
