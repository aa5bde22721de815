"""wallet"""
