//! The Rust code generated from the vendored protos (`providers/proto`),
//! nested the way the generated paths expect (`nebius::compute::v1`, with
//! `google` beside `nebius`).

#![allow(
    clippy::all,
    clippy::pedantic,
    missing_docs,
    unreachable_pub,
    dead_code
)]

pub mod google {
    pub mod rpc {
        include!("proto/google.rpc.rs");
    }
}

pub mod nebius {
    pub mod common {
        pub mod v1 {
            include!("proto/nebius.common.v1.rs");
        }
    }
    pub mod compute {
        pub mod v1 {
            include!("proto/nebius.compute.v1.rs");
        }
    }
    pub mod billing {
        pub mod v1 {
            include!("proto/nebius.billing.v1.rs");
        }
    }
}
