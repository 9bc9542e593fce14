"""The user's KMS-wrapped data keys as a store: the erase adapter that crypto-shreds them (the key service itself is a
privacy primitive, ``stores.privacy.keys``).
"""
