//! The run machine on a virtual clock: scripted inputs, every output checked.
