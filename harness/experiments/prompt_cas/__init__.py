"""prompt_cas"""
