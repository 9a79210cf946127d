"""Everything that knows EasyBuild: hook functions, settings read from an easyconfig, the `eb`
configuration and the demo. The only package that imports easybuild (and only on use)."""
