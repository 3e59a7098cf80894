//! The traps of reading bills, each a test named after it, with figures
//! derived by hand.
