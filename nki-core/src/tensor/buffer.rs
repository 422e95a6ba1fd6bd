//! Memory spaces (`nl.sbuf`, `nl.psum`, `nl.private_hbm`, `nl.shared_hbm`).

use std::fmt;

/// Where a tensor lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Buffer {
    /// On-chip state buffer, private to a program; dim 0 is the partition dim.
    Sbuf,
    /// On-chip matmul accumulation buffer, private to a program; 8 banks of 2 KiB per partition.
    Psum,
    /// Device memory private to one program of the SPMD grid (`nl.hbm` is an alias).
    PrivateHbm,
    /// Device memory shared by every program of the grid; kernel inputs and outputs live here.
    SharedHbm,
}

impl Buffer {
    /// SBUF or PSUM.
    pub const fn is_on_chip(self) -> bool {
        matches!(self, Buffer::Sbuf | Buffer::Psum)
    }

    /// Either HBM kind.
    pub const fn is_hbm(self) -> bool {
        matches!(self, Buffer::PrivateHbm | Buffer::SharedHbm)
    }

    /// The Python expression naming this buffer in emitted kernels.
    pub const fn python_name(self) -> &'static str {
        match self {
            Buffer::Sbuf => "nl.sbuf",
            Buffer::Psum => "nl.psum",
            Buffer::PrivateHbm => "nl.private_hbm",
            Buffer::SharedHbm => "nl.shared_hbm",
        }
    }

    /// The memory the spec's rules name.
    pub const fn memory(self) -> nki_spec::Memory {
        match self {
            Buffer::Sbuf => nki_spec::Memory::Sbuf,
            Buffer::Psum => nki_spec::Memory::Psum,
            Buffer::PrivateHbm => nki_spec::Memory::PrivateHbm,
            Buffer::SharedHbm => nki_spec::Memory::SharedHbm,
        }
    }

    /// Short name used in messages.
    pub const fn short_name(self) -> &'static str {
        match self {
            Buffer::Sbuf => "SBUF",
            Buffer::Psum => "PSUM",
            Buffer::PrivateHbm => "private HBM",
            Buffer::SharedHbm => "shared HBM",
        }
    }
}

impl fmt::Display for Buffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.short_name())
    }
}
