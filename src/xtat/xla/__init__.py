"""XLA plumbing: the proto schemas jaxlib embeds (`schema`) and the protobuf wire format (`protowire`)."""
