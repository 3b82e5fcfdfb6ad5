"""Figures as SVG strings, pure Python with no dependency: shared by the bench and the demo.

Contract: ``svgplot`` draws line charts; ``concurrency.chart`` the concurrency bench's figure;
``memwall.memwall_chart`` the per-category tokens/s against the bandwidth limit. No
torch, no I/O: callers write or serve the strings. Imports nothing else of the package.
"""
