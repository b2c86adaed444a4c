"""Scene plug-ins: what a domain knows about the scenes its episodes happen in (port: ``base``)."""
