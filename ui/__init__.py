"""The PySide6 desktop shell. The only package that imports Qt; it draws and delegates to client/."""
