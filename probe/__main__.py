try:
    from .cli import main
except KeyboardInterrupt:  # Ctrl-C while the command's modules load (~0.5 s): nothing was started, no traceback
    raise SystemExit(130) from None

raise SystemExit(main())
